package emulator

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/cfp-dev/cfp/emulator/auth"
	"github.com/cfp-dev/cfp/internal/epk"
)

// Users, permissions and resource tokens. A permission gives its user access to one resource (a
// container, or a document, by name-based or resource-id link) in mode Read or All, optionally
// only to one logical partition (resourcePartitionKey). Reading a permission answers a resource
// token in _token; a request signed with it (Authorization: type=resource&ver=1.0&sig=<token>)
// is served only on that resource and what it contains, for reads (Read) or everything (All),
// and for reads of the database and container above it (the SDKs read a container's definition
// and partition key ranges before they address its documents). Anything else is 403.
//
// A token names its permission and expiry and is signed with the account key: it is good until
// it expires (x-ms-documentdb-expiry-seconds when the permission was read, 3600 s by default,
// at most 18000 s, as the service) or until the permission, its user or its database is deleted.

const hdrTokenExpiry = "x-ms-documentdb-expiry-seconds"

// Token lifetimes, as the service's.
const (
	defaultTokenExpiry = time.Hour
	maxTokenExpiry     = 5 * time.Hour
)

// msgForbidden is the service's message of a 403 to a resource token outside its permission.
const msgForbidden = "Insufficient permissions provided in the authorization header for the corresponding request. Please retry with another authorization header."

var (
	userKind = resKind{Name: "users", Field: "Users", extra: func(body map[string]any, _ resRecord) {
		body["_permissions"] = "permissions/"
	}}
	permissionKind = resKind{Name: "permissions", Field: "Permissions", validate: validatePermission}
)

func validatePermission(props map[string]any) error {
	// Kept as given (the Python SDK sends "read" and "all"), compared without case.
	mode, _ := stringProp(props, "permissionMode")
	switch {
	case strings.EqualFold(mode, "Read"), strings.EqualFold(mode, "All"):
	default:
		return badRequest("invalid permissionMode %q: want Read or All", mode)
	}
	res, _ := stringProp(props, "resource")
	s := strings.Split(strings.Trim(res, "/"), "/")
	if len(s) < 2 || s[0] != "dbs" || len(s)%2 != 0 {
		return badRequest("invalid permission resource %q: want the link of a database, container or document (dbs/<db>/colls/<coll>[/docs/<id>])", res)
	}
	if pk, ok := props["resourcePartitionKey"]; ok && pk != nil {
		if _, ok := pk.([]any); !ok {
			return badRequest("invalid resourcePartitionKey: want the partition key as a JSON array")
		}
	}
	return nil
}

// routeUsers serves dbs/<db>/users[/<user>[/permissions[/<permission>]]].
func (e *Emulator) routeUsers(w http.ResponseWriter, r *http.Request, s []string) {
	db, err := e.store.getDatabase(s[1])
	if err != nil {
		e.fail(w, err)
		return
	}
	owner := resOwner{RID: db.RID, Self: "dbs/" + db.RID + "/"}
	if len(s) <= 4 {
		e.serveRes(w, r, userKind, owner, s[3:])
		return
	}
	user, err := e.store.getRes("users", db.RID, s[3])
	if err != nil {
		e.fail(w, err)
		return
	}
	pOwner := resOwner{RID: user.RID, Self: owner.Self + "users/" + user.RID + "/"}
	k := permissionKind
	k.extra = func(body map[string]any, rec resRecord) { body["_token"] = e.resourceToken(rec.RID, tokenExpiry(r)) }
	e.serveRes(w, r, k, pOwner, s[5:])
}

// tokenExpiry is the lifetime a request asks for its resource tokens.
func tokenExpiry(r *http.Request) time.Duration {
	n, err := strconv.Atoi(r.Header.Get(hdrTokenExpiry))
	if err != nil || n <= 0 {
		return defaultTokenExpiry
	}
	return min(time.Duration(n)*time.Second, maxTokenExpiry)
}

// resourceToken is the token of permission permRID, good for d.
func (e *Emulator) resourceToken(permRID string, d time.Duration) string {
	payload := permRID + "." + strconv.FormatInt(time.Now().Add(d).Unix(), 10)
	return "type=resource&ver=1.0&sig=" + payload + "." + e.tokenMAC(payload)
}

func (e *Emulator) tokenMAC(payload string) string {
	m := hmac.New(sha256.New, e.key)
	m.Write([]byte("cfp-resource-token\n" + payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkDate checks a request's x-ms-date (auth.CheckDate). A request signed with a resource
// token may have none, as the JavaScript SDK sends it: the token carries its own expiry.
func checkDate(r *http.Request) error {
	date := r.Header.Get("x-ms-date")
	if date == "" && isResourceToken(r.Header.Get("Authorization")) {
		return nil
	}
	return auth.CheckDate(date, time.Now())
}

// isResourceToken reports whether an Authorization header carries a resource token.
func isResourceToken(authz string) bool {
	a := strings.ToLower(authz)
	return strings.HasPrefix(a, "type=resource") || strings.HasPrefix(a, "type%3dresource")
}

// permRecord is a permission with where it is.
type permRecord struct {
	resRecord
	Mode     string `json:"permissionMode"`
	Resource string `json:"resource"`
	PK       []any  `json:"resourcePartitionKey"`
}

// verifyResourceToken authenticates a request signed with a resource token, and authorises it
// for the request's path segs (by names) and method.
func (e *Emulator) verifyResourceToken(r *http.Request, segs []string) error {
	h, err := url.PathUnescape(r.Header.Get("Authorization"))
	if err != nil {
		return fmt.Errorf("malformed resource token: %w", err)
	}
	sig := ""
	for f := range strings.SplitSeq(h, "&") {
		if v, ok := strings.CutPrefix(f, "sig="); ok {
			sig = v
		}
	}
	parts := strings.Split(sig, ".")
	if len(parts) != 3 || !hmac.Equal([]byte(e.tokenMAC(parts[0]+"."+parts[1])), []byte(parts[2])) {
		return errors.New("the resource token is not one this emulator issued (or it was changed)")
	}
	exp, _ := strconv.ParseInt(parts[1], 10, 64)
	if time.Now().Unix() > exp {
		return errors.New("the resource token has expired: read the permission again for a new one")
	}
	perm, err := e.store.findPermission(parts[0])
	if err != nil {
		return errors.New("the resource token's permission no longer exists")
	}
	return e.authorize(r, segs, perm)
}

// findPermission finds a live permission by resource id: its user and database must exist.
func (s *store) findPermission(rid string) (permRecord, error) {
	var out permRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRes)
		if b == nil {
			return errNotFound
		}
		prefix := []byte("permissions\x00")
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var rec resRecord
			if json.Unmarshal(v, &rec) != nil || rec.RID != rid {
				continue
			}
			userRID := strings.Split(string(k), "\x00")[1]
			if !liveUser(tx, b, userRID) {
				return errNotFound
			}
			out.resRecord = rec
			return json.Unmarshal(rec.Props, &out)
		}
		return errNotFound
	})
	return out, err
}

// liveUser reports whether the user with resource id userRID exists in a live database.
func liveUser(tx *bolt.Tx, b *bolt.Bucket, userRID string) bool {
	live := map[string]bool{}
	_ = tx.Bucket(bucketDBs).ForEach(func(_, v []byte) error {
		var d dbRecord
		if json.Unmarshal(v, &d) == nil {
			live[d.RID] = true
		}
		return nil
	})
	prefix := []byte("users\x00")
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var rec resRecord
		if json.Unmarshal(v, &rec) == nil && rec.RID == userRID {
			return live[strings.Split(string(k), "\x00")[1]]
		}
	}
	return false
}

// resourceNames turns a permission's resource link into names (a database or container given
// by resource id is looked up), so that it compares with a request's path.
func (e *Emulator) resourceNames(link string) []string {
	s := strings.Split(strings.Trim(link, "/"), "/")
	if len(s) >= 2 {
		if _, err := e.store.getDatabase(s[1]); err != nil {
			if named, ok := e.namesOfRIDs(s[:min(len(s), 4)]); ok {
				copy(s, named)
			}
		}
	}
	return s
}

// isReadRequest reports whether a request only reads: a GET, a HEAD, or a query.
func isReadRequest(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead ||
		(r.Method == http.MethodPost && (isQuery(r) || strings.EqualFold(r.Header.Get(hdrQueryPlan), "true")))
}

// authorize checks a request (path segs, by names) against the permission of its token.
func (e *Emulator) authorize(r *http.Request, segs []string, p permRecord) error {
	if len(segs) == 0 {
		return nil // the account: any token reads it
	}
	if len(segs) >= 3 && segs[2] == "users" {
		return &forbiddenError{msg: msgForbidden} // users and permissions take the master key
	}
	res := e.resourceNames(p.Resource)
	under := len(segs) >= len(res) && equalSegs(segs[:len(res)], res)
	switch {
	case under:
		if !strings.EqualFold(p.Mode, "All") && !isReadRequest(r) {
			return &forbiddenError{msg: msgForbidden}
		}
		if p.PK != nil {
			return authorizePartition(r, segs, p.PK)
		}
		return nil
	case r.Method == http.MethodGet && len(segs) < len(res) && len(segs)%2 == 0 && equalSegs(segs, res[:len(segs)]):
		// The database or container above the resource (an even path names one resource);
		// not a feed above it (dbs/<db>/colls, .../docs: an odd path), which would list what
		// the permission does not reach: a document's token read every document through its
		// container's read feed or change feed.
		return nil
	case r.Method == http.MethodGet && len(segs) == 5 && segs[4] == "pkranges" && len(res) >= 4 && equalSegs(segs[:4], res[:4]):
		return nil // the partition key ranges of the resource's container
	}
	return &forbiddenError{msg: msgForbidden}
}

// authorizePartition checks a request under the resource of a permission limited to the
// logical partition pk: documents and stored procedure executions of that partition only
// (the request's partition key header names it), reads of the rest. A bulk request is refused:
// its operations name their own partitions. Writes to the container or to its scripts reach
// every partition, so they are refused too.
func authorizePartition(r *http.Request, segs []string, pk []any) error {
	forbidden := &forbiddenError{msg: msgForbidden}
	keyed := len(segs) >= 5 && segs[4] == "docs" ||
		len(segs) == 6 && segs[4] == "sprocs" && r.Method == http.MethodPost
	if !keyed {
		if !isReadRequest(r) {
			return forbidden
		}
		return nil
	}
	comps, ok, err := headerPK(r)
	if err != nil || !ok || epk.Canonical(comps) != epk.Canonical(pk) {
		return forbidden
	}
	if strings.EqualFold(r.Header.Get(hdrIsBatch), "true") && strings.EqualFold(r.Header.Get(hdrBatchAtomic), "false") {
		return forbidden
	}
	return nil
}

func equalSegs(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
