package emulator

import "fmt"

// ScanChangeFeed reads the latest-version change feed of every live range of db/coll from the
// beginning, straight from storage in pages of pageSize (0: the gateway's maximum), one range
// after another, and calls fn with each document. The bytes are valid only during the call. It
// bypasses HTTP, signatures and fault rules: it is the physical limit that benchmarks compare the
// gateway and SDK paths with. It returns the number of documents read.
func (e *Emulator) ScanChangeFeed(db, coll string, pageSize int, fn func(doc []byte)) (int, error) {
	if pageSize <= 0 {
		pageSize = maxPageSize
	}
	st, err := e.store.getContainer(db, coll)
	if err != nil {
		return 0, fmt.Errorf("scan change feed of %s/%s: %w", db, coll, err)
	}
	n := 0
	for _, r := range st.live() {
		var since uint64
		for {
			page, err := e.store.changeFeed(db, coll, feedRequest{RangeID: r.idString(), Since: since, Max: pageSize})
			if err != nil {
				return n, fmt.Errorf("scan change feed of %s/%s range %s: %w", db, coll, r.idString(), err)
			}
			if len(page.Docs) == 0 {
				break
			}
			for _, d := range page.Docs {
				fn(d)
			}
			n += len(page.Docs)
			since = page.Etag
		}
	}
	return n, nil
}
