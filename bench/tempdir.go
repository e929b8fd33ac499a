package bench

import (
	"fmt"
	"io"
	"os"
)

// TempDir makes a temporary folder named after the command for its
// tables and journal. With keep it prints "name: what in dir" to log and
// remove does nothing, so the folder outlives the run; otherwise remove
// deletes it. Call remove once the server using the folder has stopped.
func TempDir(name, what string, keep bool, log io.Writer) (dir string, remove func(), err error) {
	dir, err = os.MkdirTemp("", name+"-")
	if err != nil {
		return "", nil, err
	}
	if keep {
		fmt.Fprintf(log, "%s: %s in %s\n", name, what, dir)
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
