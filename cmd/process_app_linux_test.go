package cmd

import (
	"os"
	"syscall"
	"testing"
)

// TestGrowPipe_Socket checks that the send buffer of a socketpair, what Node.js gives a
// child's stdout, grows: a batch line of 1,000 documents (~250 KB) no longer waits for the
// parent to read it in pieces (bench/nodebench). Before, only pipes grew.
func TestGrowPipe_Socket(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, in := os.NewFile(uintptr(fds[0]), "out"), os.NewFile(uintptr(fds[1]), "in")
	defer out.Close()
	defer in.Close()
	before, err := syscall.GetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	if err != nil {
		t.Fatal(err)
	}
	growPipe(out)
	after, err := syscall.GetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("SO_SNDBUF %d after growPipe, %d before: want it larger", after, before)
	}
	t.Logf("SO_SNDBUF %d -> %d", before, after)
}

// TestGrowPipe_Pipe checks that a pipe grows to appPipeSize (within the system's limit).
func TestGrowPipe_Pipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	const fGetPipeSize = 1032
	size := func() int {
		n, _, errno := syscall.Syscall(syscall.SYS_FCNTL, w.Fd(), fGetPipeSize, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		return int(n)
	}
	before := size()
	growPipe(w)
	if after := size(); after <= before {
		t.Fatalf("pipe size %d after growPipe, %d before: want it larger", after, before)
	}
}
