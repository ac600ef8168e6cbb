package emulator

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime/debug"
)

// CorruptError reports a data file that cannot be read: truncated, overwritten, or not a data
// file at all. Its message is one line that names the data directory.
type CorruptError struct {
	Dir    string
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("data directory %s is corrupt: %s", e.Dir, e.Reason)
}

// The bbolt file format the check reads: two meta pages (0 and 1), each a 16-byte page header
// then magic u32, version u32, page size u32, flags u32, root bucket (root page u64, sequence
// u64), freelist page u64, high-water page u64, txid u64 and an FNV-64a checksum of the 56
// bytes before it, in the machine's byte order.
const (
	boltMagic      = 0xED0CDAED
	boltVersion    = 2
	boltPageHeader = 16
	boltMetaSize   = 64 // up to and including the checksum
	boltNoFreelist = ^uint64(0)
	// maxBoltPage bounds the page sizes the check accepts (bbolt uses the OS page size).
	maxBoltPage = 64 << 10
)

// boltMeta is a decoded meta page.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	hwm      uint64 // pages in use: the file must hold at least hwm*pageSize bytes
	txid     uint64
}

// parseBoltMeta decodes the meta page that starts at b; ok is false when it is not a valid one.
func parseBoltMeta(b []byte) (boltMeta, bool) {
	if len(b) < boltPageHeader+boltMetaSize {
		return boltMeta{}, false
	}
	m := b[boltPageHeader : boltPageHeader+boltMetaSize]
	ne := binary.NativeEndian
	h := fnv.New64a()
	h.Write(m[:56])
	if ne.Uint32(m[0:]) != boltMagic || ne.Uint32(m[4:]) != boltVersion || ne.Uint64(m[56:]) != h.Sum64() {
		return boltMeta{}, false
	}
	meta := boltMeta{pageSize: ne.Uint32(m[8:]), root: ne.Uint64(m[16:]), freelist: ne.Uint64(m[32:]), hwm: ne.Uint64(m[40:]), txid: ne.Uint64(m[48:])}
	if meta.pageSize < 512 || meta.pageSize > maxBoltPage || meta.pageSize&(meta.pageSize-1) != 0 {
		return boltMeta{}, false
	}
	return meta, true
}

// checkDataFile checks the bbolt file at path against its meta pages before it is mapped: bbolt
// trusts them and faults (SIGBUS) or panics on a file shorter than they say. A missing or empty
// file is a new one. The error is a *CorruptError.
func checkDataFile(dir, path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open emulator data %s: %w", dir, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open emulator data %s: %w", dir, err)
	}
	size := fi.Size()
	if size == 0 {
		return nil
	}
	corrupt := func(format string, args ...any) error {
		return &CorruptError{Dir: dir, Reason: fmt.Sprintf(format, args...)}
	}
	head := make([]byte, 2*maxBoltPage)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("read emulator data %s: %w", dir, err)
	}
	head = head[:n]
	// Meta page 0 gives the page size, and so where meta page 1 is; when it is damaged, meta
	// page 1 is looked for at every page size bbolt may have used.
	var metas []boltMeta
	if m, ok := parseBoltMeta(head); ok {
		metas = append(metas, m)
		if m1, ok := parseBoltMeta(head[min(int(m.pageSize), len(head)):]); ok {
			metas = append(metas, m1)
		}
	} else {
		for ps := 512; ps <= maxBoltPage; ps *= 2 {
			if ps >= len(head) {
				break
			}
			if m1, ok := parseBoltMeta(head[ps:]); ok && int(m1.pageSize) == ps {
				metas = append(metas, m1)
				break
			}
		}
	}
	if len(metas) == 0 {
		return corrupt("%s has no valid meta page (%d bytes; not an emulator data file, or overwritten)", path, size)
	}
	// bbolt opens at the meta page with the highest transaction id.
	m := metas[0]
	if len(metas) == 2 && metas[1].txid > m.txid {
		m = metas[1]
	}
	if need := int64(m.hwm) * int64(m.pageSize); m.hwm < 2 || size < need {
		return corrupt("%s is truncated: %d bytes, its meta page needs %d", path, size, need)
	}
	if m.root < 2 || m.root >= m.hwm || (m.freelist != boltNoFreelist && (m.freelist < 2 || m.freelist >= m.hwm)) {
		return corrupt("%s has a meta page that points outside the file", path)
	}
	// bbolt reads the freelist and the root page as it opens: a panic there would leave the
	// file locked by this process.
	if m.freelist != boltNoFreelist {
		if err := checkBoltPage(f, size, m, m.freelist, boltFreelistPage); err != nil {
			return corrupt("%s: freelist %v", path, err)
		}
	}
	if err := checkBoltPage(f, size, m, m.root, boltBranchPage, boltLeafPage); err != nil {
		return corrupt("%s: root %v", path, err)
	}
	return nil
}

// Page types of a bbolt page header (id u64, flags u16, count u16, overflow u32).
const (
	boltBranchPage   = 0x01
	boltLeafPage     = 0x02
	boltFreelistPage = 0x10
)

// checkBoltPage checks that page id of the file has its own id, one of the page types, and its
// overflow pages inside the file.
func checkBoltPage(f *os.File, size int64, m boltMeta, id uint64, types ...uint16) error {
	hdr := make([]byte, boltPageHeader)
	if _, err := f.ReadAt(hdr, int64(id)*int64(m.pageSize)); err != nil {
		return fmt.Errorf("page %d cannot be read: %w", id, err)
	}
	ne := binary.NativeEndian
	if got := ne.Uint64(hdr); got != id {
		return fmt.Errorf("page %d has the id %d", id, got)
	}
	flags, overflow := ne.Uint16(hdr[8:]), ne.Uint32(hdr[12:])
	ok := false
	for _, t := range types {
		ok = ok || flags == t
	}
	if !ok {
		return fmt.Errorf("page %d has the type %#x", id, flags)
	}
	if end := (int64(id) + 1 + int64(overflow)) * int64(m.pageSize); uint64(id)+1+uint64(overflow) > m.hwm || end > size {
		return fmt.Errorf("page %d runs past the end of the file", id)
	}
	return nil
}

// catchCorrupt turns a panic or memory fault of the calling goroutine, which bbolt raises on
// pages it cannot read, into a *CorruptError in *err. Use it as
//
//	defer catchCorrupt(dir, &err)()
//
// after which a fault on the mapped file panics (debug.SetPanicOnFault) instead of killing the
// process; the returned function restores the goroutine's previous fault mode.
func catchCorrupt(dir string, err *error) func() {
	old := debug.SetPanicOnFault(true)
	return func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			*err = &CorruptError{Dir: dir, Reason: fmt.Sprint(r)}
		}
	}
}
