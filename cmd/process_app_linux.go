package cmd

import (
	"os"
	"syscall"
)

// fSetPipeSize is Linux's F_SETPIPE_SZ.
const fSetPipeSize = 1031

// appPipeSize is the capacity asked for the channel's pipe, or for the send buffer of its
// socket: a batch line of 1,000 documents of ~250 B goes in one write instead of four 64 KiB
// turns of both processes (bench/nodebench). The kernel caps a pipe at
// /proc/sys/fs/pipe-max-size (1 MiB by default) and a socket's send buffer at
// /proc/sys/net/core/wmem_max (doubled).
const appPipeSize = 1 << 20

// growPipe enlarges out's buffer when out is a pipe (Python's subprocess) or a socket (Node.js
// gives its children's stdio a socketpair); anything else is left alone.
func growPipe(out any) {
	f, ok := out.(*os.File)
	if !ok {
		return
	}
	st, err := f.Stat()
	if err != nil {
		return
	}
	mode := st.Mode()
	if mode&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		if mode&os.ModeSocket != 0 {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, appPipeSize)
			return
		}
		_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSize, appPipeSize)
	})
}
