package bench

import (
	"io"
	"text/tabwriter"
)

// NewTable returns the tabwriter every bench report prints its rows
// with: right-aligned columns two spaces apart. Write tab-terminated
// cells and Flush it when done.
func NewTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
}
