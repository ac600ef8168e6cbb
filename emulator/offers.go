package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// Offers (throughput) are kept in their own bucket, one JSON record per offer id:
//
//	offers                    <offer id>              -> offer (JSON, as served)
//
// A database or container gets an offer when it is created with x-ms-offer-throughput (manual)
// or x-ms-cosmos-offer-autopilot-settings (autoscale). A container created with neither gets
// defaultContainerThroughput of its own, as in a provisioned account, unless its database has an
// offer: then it shares the database's and has none (reading its throughput is 404). A database
// created with neither has none. Throughput is only recorded: the emulator does not throttle by it.
var bucketOffers = []byte("offers")

const (
	hdrOfferThroughput = "x-ms-offer-throughput"
	hdrOfferAutoscale  = "x-ms-cosmos-offer-autopilot-settings"
)

// defaultContainerThroughput is the manual throughput of a container created without any in a
// database without any, as the service gives it.
const defaultContainerThroughput = 400

// offerContent reads the offer a create request asks for: its content (nil when it asks for
// none and defaultRU is 0: a manual offer of defaultRU otherwise) and the throughput it
// provisions (the manual throughput, or the autoscale maximum; 0 without an offer).
func offerContent(r *http.Request, defaultRU int) (map[string]any, int, error) {
	switch {
	case r.Header.Get(hdrOfferThroughput) != "":
		n, err := strconv.Atoi(r.Header.Get(hdrOfferThroughput))
		if err != nil || n < 400 {
			return nil, 0, badRequest("invalid %s %q: at least 400 RU/s", hdrOfferThroughput, r.Header.Get(hdrOfferThroughput))
		}
		return map[string]any{"offerThroughput": n}, n, nil
	case r.Header.Get(hdrOfferAutoscale) != "":
		var as map[string]any
		if err := json.Unmarshal([]byte(r.Header.Get(hdrOfferAutoscale)), &as); err != nil {
			return nil, 0, badRequest("invalid %s: %v", hdrOfferAutoscale, err)
		}
		maxRU, _ := as["maxThroughput"].(float64)
		return map[string]any{"offerAutopilotSettings": as}, int(maxRU), nil
	case defaultRU > 0:
		return map[string]any{"offerThroughput": defaultRU}, defaultRU, nil
	}
	return nil, 0, nil
}

// partitionsFor is the number of physical partitions of a new container provisioned with
// throughput RU/s: Options.Partitions when set, otherwise one per ThroughputPerPartition RU/s,
// at least one (a container without its own throughput, in a database that shares its
// throughput, has one).
func (e *Emulator) partitionsFor(throughput int) int {
	if e.opts.Partitions > 0 {
		return e.opts.Partitions
	}
	n := (throughput + ThroughputPerPartition - 1) / ThroughputPerPartition
	return min(max(n, 1), maxPartitions)
}

// createOffer records the offer content (see offerContent; nothing when it is nil) of the
// resource whose _self link is resourceSelf and resource id rid.
func (e *Emulator) createOffer(content map[string]any, resourceSelf, rid string) error {
	if content == nil {
		return nil
	}
	// Offer ids are lower case: SDKs sign rid-based links in lower case.
	id := strings.ToLower(strings.NewReplacer("+", "", "-", "", "=", "").Replace(encodeRID(newRID(6, nil))))
	offer := map[string]any{
		"id": id, "_rid": id, "_self": "offers/" + id + "/", "_etag": newEtag(), "_ts": e.opts.Now().Unix(),
		"offerVersion": "V2", "offerType": "Invalid", "resource": resourceSelf, "offerResourceId": rid,
		"content": content,
	}
	return e.putOffer(id, offer)
}

func (e *Emulator) putOffer(id string, offer map[string]any) error {
	b, err := json.Marshal(offer)
	if err != nil {
		return err
	}
	return e.db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketOffers)
		if err != nil {
			return err
		}
		return bk.Put([]byte(id), b)
	})
}

func (e *Emulator) listOffers() ([]map[string]any, error) {
	var out []map[string]any
	err := e.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketOffers)
		if bk == nil {
			return nil
		}
		return bk.ForEach(func(_, v []byte) error {
			var o map[string]any
			if err := json.Unmarshal(v, &o); err != nil {
				return fmt.Errorf("decode offer: %w", err)
			}
			out = append(out, o)
			return nil
		})
	})
	return out, err
}

// hasOffer reports whether the resource whose _self link is resourceSelf has an offer.
func (e *Emulator) hasOffer(resourceSelf string) (bool, error) {
	offers, err := e.listOffers()
	if err != nil {
		return false, err
	}
	for _, o := range offers {
		if o["resource"] == resourceSelf {
			return true, nil
		}
	}
	return false, nil
}

func (e *Emulator) getOffer(id string) (map[string]any, error) {
	offers, err := e.listOffers()
	if err != nil {
		return nil, err
	}
	for _, o := range offers {
		if o["id"] == strings.ToLower(id) {
			return o, nil
		}
	}
	return nil, errNotFound
}

// serveOffers serves /offers: queries and listing (segs empty), read and replace of one offer.
func (e *Emulator) serveOffers(w http.ResponseWriter, r *http.Request, segs []string) {
	switch {
	case len(segs) == 0 && (r.Method == http.MethodGet || (r.Method == http.MethodPost && isQuery(r))):
		q, params, err := parseQuery(r)
		if err != nil {
			e.fail(w, err)
			return
		}
		offers, err := e.listOffers()
		if err != nil {
			e.fail(w, err)
			return
		}
		e.writeMetaQuery(w, q, params, "", "Offers", offers)
	case len(segs) == 1 && r.Method == http.MethodGet:
		o, err := e.getOffer(segs[0])
		if err != nil {
			e.fail(w, err)
			return
		}
		b, _ := json.Marshal(o)
		writeJSON(w, http.StatusOK, chargeRead, b)
	case len(segs) == 1 && r.Method == http.MethodPut:
		o, err := e.getOffer(segs[0])
		if err != nil {
			e.fail(w, err)
			return
		}
		b, err := readBody(r)
		if err != nil {
			e.fail(w, err)
			return
		}
		var req struct {
			Content map[string]any `json:"content"`
		}
		if err := json.Unmarshal(b, &req); err != nil || req.Content == nil {
			e.fail(w, badRequest("an offer replace needs a content object"))
			return
		}
		if n, ok := req.Content["offerThroughput"].(float64); ok && n < 400 {
			e.fail(w, badRequest("offerThroughput must be at least 400 RU/s, got %v", n))
			return
		}
		o["content"], o["_etag"], o["_ts"] = req.Content, newEtag(), e.opts.Now().Unix()
		if err := e.putOffer(o["id"].(string), o); err != nil {
			e.fail(w, err)
			return
		}
		out, _ := json.Marshal(o)
		writeJSON(w, http.StatusOK, chargeWrite, out)
	default:
		e.notSupported(w, r, "this operation on offers")
	}
}

// notSupported answers an operation the emulator does not serve: 400, never a 404 that SDKs and
// applications would read as "does not exist".
func (e *Emulator) notSupported(w http.ResponseWriter, r *http.Request, what string) {
	writeError(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("not supported by cfp emulator: %s (%s %s)", what, r.Method, clientPath(r)), 0)
}
