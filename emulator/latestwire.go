package emulator

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// latestEnvelope renders the documents of a latest-version change-feed page in wire format
// 2021-09-15, which a latest-version read may ask for (the Java EPK Change Feed Processor
// always does): each document, byte for byte, as {"current": doc, "metadata": {"crts", "lsn"}},
// crts being its _ts and lsn its _lsn. A latest-version read keeps no history, so the metadata
// has no operationType or previous image.
func latestEnvelope(collRID string, docs [][]byte) ([]byte, error) {
	items := make([][]byte, len(docs))
	for i, d := range docs {
		var sys struct {
			LSN uint64 `json:"_lsn"`
			TS  int64  `json:"_ts"`
		}
		if err := json.Unmarshal(d, &sys); err != nil {
			return nil, fmt.Errorf("decode change-feed document: %w", err)
		}
		b := make([]byte, 0, len(d)+64)
		b = append(b, `{"current":`...)
		b = append(b, d...)
		b = append(b, `,"metadata":{"crts":`...)
		b = strconv.AppendInt(b, sys.TS, 10)
		b = append(b, `,"lsn":`...)
		b = strconv.AppendUint(b, sys.LSN, 10)
		items[i] = append(b, "}}"...)
	}
	return documentsBody(collRID, items), nil
}
