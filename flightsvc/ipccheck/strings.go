package ipccheck

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// validateStrings validates a utf8 or large_utf8 column in full, as
// array.ValidateFull does (structure, null count, offsets non-negative
// and non-decreasing within the data, every value UTF-8), but checks the
// UTF-8 of all values at once: the values' bytes between the first and
// the last offset are valid UTF-8, and no offset in between falls inside
// a character (on a continuation byte), so each value is whole characters
// of valid UTF-8. ValidateFull checks value by value, which costs the
// most of a batch's validation for short strings (the standard workload's
// two string columns: 2.6 ms of 65,536 rows, 0.7 ms this way, against
// 2.3 ms to decode them). ok is false for other columns.
func validateStrings(col arrow.Array) (ok bool, err error) {
	var check func(data []byte) error // called once the offsets are known present
	switch a := col.(type) {
	case *array.String:
		check = func(data []byte) error { return checkStrings(a.ValueOffsets(), data) }
	case *array.LargeString:
		check = func(data []byte) error { return checkStrings(a.ValueOffsets(), data) }
	default:
		return false, nil
	}
	// Buffers and the outer offsets first: ValueOffsets slices by them.
	if err := array.Validate(col); err != nil {
		return true, err
	}
	if err := checkNullCount(col); err != nil {
		return true, err
	}
	if col.Len() == 0 {
		// Valid without offsets: arrow-go's IPC writer sends none for an
		// empty column, and ValueOffsets would slice the absent buffer.
		return true, nil
	}
	var data []byte
	if b := col.Data().Buffers()[2]; b != nil {
		data = b.Bytes()
	}
	return true, check(data)
}

// checkNullCount compares col's null count with its validity bitmap.
func checkNullCount(col arrow.Array) error {
	n := col.Len()
	if nulls := col.NullBitmapBytes(); nulls != nil {
		if got := n - bitutil.CountSetBits(nulls, col.Data().Offset(), n); got != col.NullN() {
			return fmt.Errorf("null count is %d, the validity bitmap has %d nulls", col.NullN(), got)
		}
	} else if col.NullN() != 0 {
		return fmt.Errorf("null count is %d without a validity bitmap", col.NullN())
	}
	return nil
}

// checkStrings checks the n+1 offsets of n values (the first and the last
// lie within data) and the values' UTF-8.
func checkStrings[O int32 | int64](offsets []O, data []byte) error {
	n := len(offsets) - 1
	if n == 0 {
		return nil
	}
	// ValueOffsets is the column's n+1 offsets, which array.Validate
	// checked are present and whose first and last lie in data.
	first, last := offsets[0], offsets[n]
	if first < 0 {
		return fmt.Errorf("string offset %d of row 0 is negative", first)
	}
	// In ASCII every byte starts a character: no offset can split one.
	if first > last || isASCII(data[first:last]) {
		return checkIncreasing(offsets)
	}
	if !utf8.Valid(data[first:last]) {
		return badUTF8(offsets, data)
	}
	prev := first
	for _, o := range offsets[1:] {
		if o < prev {
			return checkIncreasing(offsets) // names the row
		}
		// Every offset before last starts a value: a character's first byte.
		if o < last && !utf8.RuneStart(data[o]) {
			return badUTF8(offsets, data)
		}
		prev = o
	}
	return nil
}

// checkIncreasing checks that offsets do not decrease.
func checkIncreasing[O int32 | int64](offsets []O) error {
	for i := 1; i < len(offsets); i++ {
		if offsets[i] < offsets[i-1] {
			return fmt.Errorf("string offsets decrease at row %d: %d < %d", i, offsets[i], offsets[i-1])
		}
	}
	return nil
}

// isASCII reports whether b has no byte over 0x7f, eight bytes at a time.
func isASCII(b []byte) bool {
	var or uint64
	for len(b) >= 32 {
		or |= binary.LittleEndian.Uint64(b) | binary.LittleEndian.Uint64(b[8:]) |
			binary.LittleEndian.Uint64(b[16:]) | binary.LittleEndian.Uint64(b[24:])
		b = b[32:]
	}
	for len(b) >= 8 {
		or |= binary.LittleEndian.Uint64(b)
		b = b[8:]
	}
	for _, c := range b {
		or |= uint64(c)
	}
	return or&0x8080808080808080 == 0
}

// badUTF8 names the first row that is not valid UTF-8, without quoting it
// (it may be megabytes).
func badUTF8[O int32 | int64](offsets []O, data []byte) error {
	if err := checkIncreasing(offsets); err != nil {
		return err // the values cannot be cut out yet
	}
	for i := 1; i < len(offsets); i++ {
		if !utf8.Valid(data[offsets[i-1]:offsets[i]]) {
			return fmt.Errorf("string at row %d is not valid UTF-8", i-1)
		}
	}
	return fmt.Errorf("a string is not valid UTF-8") // unreachable when the caller's checks held
}
