package emulator

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
)

// The gateway's routing table: one net/http.ServeMux of method and wildcard patterns over the
// name-based path, built once by routes. serveHTTP authenticates a request, rewrites a path
// addressed by resource ids to names, applies injected faults, and then hands the request to
// the table (dispatch). Files of this package that serve more resources add their patterns in
// routes, next to the others, so that every route is in one place.
//
// Names (database, container, item ids: the odd segments of a path) reach the table
// hex-encoded (muxPath), so that no id, whatever its characters ('.', "..", '/', '%', empty),
// changes how ServeMux cleans and splits a path; handlers read them with pathName.

// routeInfoKey is the context key of a request's routeInfo.
type routeInfoKey struct{}

// routeInfo is what dispatch keeps of a request for its handler: the decoded segments of the
// name-based path, and the path as the client sent it (for messages).
type routeInfo struct {
	segs []string
	path string
}

// segsOf returns the decoded segments of the request's name-based path.
func segsOf(r *http.Request) []string {
	if ri, ok := r.Context().Value(routeInfoKey{}).(*routeInfo); ok {
		return ri.segs
	}
	segs, _ := splitPath(r.URL.EscapedPath())
	return segs
}

// clientPath is the request's path as the client sent it.
func clientPath(r *http.Request) string {
	if ri, ok := r.Context().Value(routeInfoKey{}).(*routeInfo); ok {
		return ri.path
	}
	return r.URL.Path
}

// muxPath is the path the routing table matches for segs: even segments (kinds: dbs, colls,
// docs, ...) as they are, odd ones (names) as '~' and their hex encoding.
func muxPath(segs []string) string {
	var b strings.Builder
	for i, s := range segs {
		b.WriteByte('/')
		if i%2 == 1 {
			b.WriteByte('~')
			b.WriteString(hex.EncodeToString([]byte(s)))
		} else {
			b.WriteString(url.PathEscape(s))
		}
	}
	if b.Len() == 0 {
		return "/"
	}
	return b.String()
}

// pathName is the name the wildcard key matched (see muxPath).
func pathName(r *http.Request, key string) string {
	b, _ := hex.DecodeString(strings.TrimPrefix(r.PathValue(key), "~"))
	return string(b)
}

// dispatch serves r, whose name-based path is segs, through the routing table.
func (e *Emulator) dispatch(w http.ResponseWriter, r *http.Request, segs []string) {
	ctx := context.WithValue(r.Context(), routeInfoKey{}, &routeInfo{segs: segs, path: r.URL.Path})
	r2 := r.WithContext(ctx)
	u := *r.URL
	u.Path, u.RawPath = muxPath(segs), ""
	r2.URL = &u
	e.mux.ServeHTTP(w, r2)
}

// methods registers a handler for each method of path, and for any other method the 400 "not
// supported by cfp emulator" (ServeMux would answer 405).
func (e *Emulator) methods(mux *http.ServeMux, path string, handlers map[string]http.HandlerFunc) {
	for m, h := range handlers {
		mux.HandleFunc(m+" "+path, h)
	}
	mux.HandleFunc(path, e.unsupported)
}

func (e *Emulator) unsupported(w http.ResponseWriter, r *http.Request) {
	e.notSupported(w, r, "this operation")
}

// routes builds the routing table.
func (e *Emulator) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/", e.unsupported)
	e.methods(mux, "/{$}", map[string]http.HandlerFunc{http.MethodGet: e.getAccount})
	offers := func(w http.ResponseWriter, r *http.Request) { e.serveOffers(w, r, segsOf(r)[1:]) }
	mux.HandleFunc("/offers", offers)
	mux.HandleFunc("/offers/", offers)
	e.databaseRoutes(mux)
	e.containerRoutes(mux)
	e.itemRoutes(mux)
	e.childResourceRoutes(mux)
	return mux
}

func (e *Emulator) databaseRoutes(mux *http.ServeMux) {
	e.methods(mux, "/dbs", map[string]http.HandlerFunc{
		http.MethodPost: func(w http.ResponseWriter, r *http.Request) {
			if isQuery(r) {
				e.queryDatabases(w, r)
			} else {
				e.createDatabase(w, r)
			}
		},
		http.MethodGet: e.queryDatabases,
	})
	e.methods(mux, "/dbs/{db}", map[string]http.HandlerFunc{
		http.MethodGet:    func(w http.ResponseWriter, r *http.Request) { e.readDatabase(w, pathName(r, "db")) },
		http.MethodDelete: func(w http.ResponseWriter, r *http.Request) { e.deleteDatabase(w, pathName(r, "db")) },
	})
}

func (e *Emulator) containerRoutes(mux *http.ServeMux) {
	e.methods(mux, "/dbs/{db}/colls", map[string]http.HandlerFunc{
		http.MethodPost: func(w http.ResponseWriter, r *http.Request) {
			if isQuery(r) {
				e.queryContainers(w, r, pathName(r, "db"))
			} else {
				e.createContainer(w, r, pathName(r, "db"))
			}
		},
		http.MethodGet: func(w http.ResponseWriter, r *http.Request) { e.queryContainers(w, r, pathName(r, "db")) },
	})
	const coll = "/dbs/{db}/colls/{coll}"
	e.methods(mux, coll, map[string]http.HandlerFunc{
		http.MethodGet: func(w http.ResponseWriter, r *http.Request) {
			e.readContainer(w, r, pathName(r, "db"), pathName(r, "coll"))
		},
		http.MethodDelete: func(w http.ResponseWriter, r *http.Request) {
			e.deleteContainer(w, pathName(r, "db"), pathName(r, "coll"))
		},
		http.MethodPut: func(w http.ResponseWriter, r *http.Request) {
			e.replaceContainer(w, r, pathName(r, "db"), pathName(r, "coll"))
		},
	})
	e.methods(mux, coll+"/pkranges", map[string]http.HandlerFunc{
		http.MethodGet: func(w http.ResponseWriter, r *http.Request) {
			e.readPKRanges(w, r, pathName(r, "db"), pathName(r, "coll"))
		},
	})
	conflicts := func(byID bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if !e.serveConflicts(w, r, pathName(r, "db"), pathName(r, "coll"), byID) {
				e.unsupported(w, r)
			}
		}
	}
	mux.HandleFunc(coll+"/conflicts", conflicts(false))
	mux.HandleFunc(coll+"/conflicts/{id}", conflicts(true))
	// An operation's name is an odd segment, hex-encoded like the names (muxPath).
	mux.HandleFunc(coll+"/operations/{op}", func(w http.ResponseWriter, r *http.Request) {
		if op := pathName(r, "op"); op == "partitionkeydelete" && r.Method == http.MethodPost {
			e.deleteByPartitionKey(w, r, pathName(r, "db"), pathName(r, "coll"))
		} else {
			e.notSupported(w, r, "operations/"+op)
		}
	})
}

func (e *Emulator) itemRoutes(mux *http.ServeMux) {
	const docs = "/dbs/{db}/colls/{coll}/docs"
	e.methods(mux, docs, map[string]http.HandlerFunc{
		http.MethodPost: e.postDocuments,
		http.MethodGet:  e.getDocuments,
	})
	// An item's own path first answers the routing gateway's refusal of an id it cannot route.
	item := func(serve func(w http.ResponseWriter, r *http.Request, db, coll, id string)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			id := pathName(r, "id")
			if status, msg := routedIDRule(id); status == http.StatusBadRequest {
				writeInvalidURL(w, msg)
				return
			} else if status != 0 {
				writeError(w, status, http.StatusText(status), msg, 0)
				return
			}
			serve(w, r, pathName(r, "db"), pathName(r, "coll"), id)
		}
	}
	unsupported := func(w http.ResponseWriter, r *http.Request, _, _, _ string) { e.unsupported(w, r) }
	mux.HandleFunc("GET "+docs+"/{id}", item(e.readItem))
	mux.HandleFunc("PUT "+docs+"/{id}", item(e.writeItem))
	mux.HandleFunc("DELETE "+docs+"/{id}", item(e.writeItem))
	mux.HandleFunc("PATCH "+docs+"/{id}", item(e.noTriggers(e.patchItem)))
	mux.HandleFunc(docs+"/{id}", item(unsupported))
}

// postDocuments serves POST on a container's documents: a query plan, a transactional batch
// or bulk request, a query, or an item's create or upsert, as the headers say.
func (e *Emulator) postDocuments(w http.ResponseWriter, r *http.Request) {
	db, coll := pathName(r, "db"), pathName(r, "coll")
	switch {
	case strings.EqualFold(r.Header.Get(hdrQueryPlan), "true"):
		e.writeQueryPlan(w, r)
	case strings.EqualFold(r.Header.Get(hdrIsBatch), "true"):
		if !e.refusedTriggers(w, r) {
			e.executeBatch(w, r, db, coll)
		}
	case isQuery(r):
		e.queryItems(w, r, db, coll)
	default:
		e.writeItem(w, r, db, coll, "")
	}
}

// getDocuments serves GET on a container's documents: its change feed (with A-IM), or a read
// feed of its documents.
func (e *Emulator) getDocuments(w http.ResponseWriter, r *http.Request) {
	db, coll := pathName(r, "db"), pathName(r, "coll")
	if r.Header.Get(hdrAIM) != "" {
		e.readChangeFeed(w, r, db, coll)
		return
	}
	// A read feed of the documents (no query) fans out over every partition without asking,
	// as the gateway serves it (the Python SDK's read_all_items).
	r.Header.Set(hdrEnableCrossPartition, "true")
	e.queryItems(w, r, db, coll)
}

// childResourceRoutes sends users and permissions, stored procedures, triggers and
// user-defined functions to routeChildResources, which reads the segments itself.
func (e *Emulator) childResourceRoutes(mux *http.ServeMux) {
	child := func(w http.ResponseWriter, r *http.Request) {
		if !e.routeChildResources(w, r, segsOf(r)) {
			e.unsupported(w, r)
		}
	}
	for _, p := range []string{"/dbs/{db}/users", "/dbs/{db}/colls/{coll}/sprocs", "/dbs/{db}/colls/{coll}/triggers", "/dbs/{db}/colls/{coll}/udfs"} {
		mux.HandleFunc(p, child)
		mux.HandleFunc(p+"/", child)
	}
}
