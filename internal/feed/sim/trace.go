package sim

import (
	"context"

	"github.com/cfp-dev/cfp/internal/leases"
)

// tracedDocs is the lease container as host name writes it: with -deliveries, every lease it
// creates, replaces or deletes is logged under its name (the world's observer sees writes, not writers).
func (w *World) tracedDocs(name string) leases.Documents {
	if !w.trace {
		return w.docs
	}
	return &tracing{Documents: w.docs, w: w, name: name}
}

type tracing struct {
	leases.Documents
	w    *World
	name string
}

func (t *tracing) Create(ctx context.Context, pk string, body []byte) (leases.Document, error) {
	d, err := t.Documents.Create(ctx, pk, body)
	if l, derr := leases.Decode(leases.Document{ID: d.ID, Body: body}); err == nil && derr == nil {
		t.w.logf("create %s %s by %s", l.Token, l.Range, t.name)
	}
	return d, err
}

func (t *tracing) Replace(ctx context.Context, id, pk, ifMatch string, body []byte) (leases.Document, error) {
	d, err := t.Documents.Replace(ctx, id, pk, ifMatch, body)
	if err == nil {
		t.w.logf("replace %s by %s", id, t.name)
	} else {
		t.w.logf("replace %s by %s: %v", id, t.name, err)
	}
	return d, err
}

func (t *tracing) Delete(ctx context.Context, id, pk, ifMatch string) error {
	err := t.Documents.Delete(ctx, id, pk, ifMatch)
	if err == nil {
		t.w.logf("delete %s by %s", id, t.name)
	}
	return err
}
