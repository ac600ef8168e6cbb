package cmd

import (
	"os"
	"syscall"
)

// fSetPipeSize is Linux's F_SETPIPE_SZ.
const fSetPipeSize = 1031

// appPipeSize is the capacity asked for the channel's pipe: a batch line of 1,000 documents of
// ~250 B goes in one write instead of four 64 KiB turns of both processes
// (bench/nodebench). The kernel caps it at /proc/sys/fs/pipe-max-size (1 MiB by default).
const appPipeSize = 1 << 20

// growPipe enlarges out's pipe buffer when out is a pipe; anything else is left alone.
func growPipe(out any) {
	f, ok := out.(*os.File)
	if !ok {
		return
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), fSetPipeSize, appPipeSize)
}
