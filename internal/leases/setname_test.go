package leases

import (
	"context"
	"errors"
	"testing"
)

// failingDocs is a lease container whose queries fail.
type failingDocs struct{ *MemDocuments }

func (failingDocs) QueryPrefix(context.Context, string) ([]Document, error) {
	return nil, errors.New("boom")
}

func TestResolvePrefix(t *testing.T) {
	ctx := context.Background()
	name := SetName{
		Processor: "p", Host: "myacct.documents.azure.com", JavaHost: "MyAcct.documents.azure.com",
		DatabaseRID: "k5lnAA==", ContainerRID: "k5lnAPDiLsw=", Database: "shop", Container: "orders",
	}
	byRID := "pmyacct.documents.azure.com_k5lnAA==_k5lnAPDiLsw="
	byName := "pMyAcct.documents.azure.com_shop_orders"
	tests := []struct {
		name string
		docs []string
		set  func(*SetName)
		want string
	}{
		{"an empty container bootstraps the rid set", nil, nil, byRID},
		{"the rid set", []string{byRID + "..0"}, nil, byRID},
		{"only Java's PK-range set", []string{byName + "..0", byName + "..1"}, nil, byName},
		{"only its .info marker", []string{byName + ".info"}, nil, byName},
		{"both: the rid set wins", []string{byRID + ".info", byName + "..0"}, nil, byRID},
		{"another processor's name set is not ours", []string{"other" + "MyAcct.documents.azure.com_shop_orders..0"}, nil, byRID},
		{"a longer container name is not ours", []string{byName + "2..0"}, nil, byRID},
		{"the explicit prefix as given", []string{byName + "..0"}, func(n *SetName) { n.Explicit = "mine" }, "mine"},
		{"no names: the rid set", []string{byName + "..0"}, func(n *SetName) { n.Database, n.Container = "", "" }, byRID},
		{"no Java host: the lower-case host", []string{"pmyacct.documents.azure.com_shop_orders..0"}, func(n *SetName) { n.JavaHost = "" }, "pmyacct.documents.azure.com_shop_orders"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			docs := NewMemDocuments("/id")
			for _, id := range tt.docs {
				if _, err := docs.Create(ctx, id, []byte(`{"id":"`+id+`"}`)); err != nil {
					t.Fatal(err)
				}
			}
			n := name
			if tt.set != nil {
				tt.set(&n)
			}
			if got := ResolvePrefix(ctx, docs, n); got != tt.want {
				t.Errorf("ResolvePrefix = %q, want %q", got, tt.want)
			}
		})
	}
	if got := ResolvePrefix(ctx, failingDocs{NewMemDocuments("/id")}, name); got != byRID {
		t.Errorf("ResolvePrefix over an unreadable container = %q, want the rid prefix %q", got, byRID)
	}
}
