package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncData makes f's data durable (fdatasync: the file's size too, not
// its times). A variable, for tests to fail it.
var syncData = func(f *os.File) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := c.Control(func(fd uintptr) { serr = unix.Fdatasync(int(fd)) }); err != nil {
		return err
	}
	return serr
}
