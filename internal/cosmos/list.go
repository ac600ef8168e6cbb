package cosmos

import (
	"context"
	"sort"
)

// Databases returns the ids of the account's databases, sorted.
func (a *Account) Databases(ctx context.Context) ([]string, error) {
	var ids []string
	pager := a.client.NewQueryDatabasesPager("SELECT * FROM c", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, translate(err, opInfo{op: "list databases", rbacAction: rbacReadMetadata})
		}
		for _, d := range page.Databases {
			ids = append(ids, d.ID)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Containers returns the ids of the containers of database db, sorted.
func (a *Account) Containers(ctx context.Context, db string) ([]string, error) {
	dbc, err := a.client.NewDatabase(db)
	if err != nil {
		return nil, err
	}
	var ids []string
	pager := dbc.NewQueryContainersPager("SELECT * FROM c", nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, translate(err, opInfo{op: "list containers of " + db, missing: "database " + db, rbacAction: rbacReadMetadata})
		}
		for _, c := range page.Containers {
			ids = append(ids, c.ID)
		}
	}
	sort.Strings(ids)
	return ids, nil
}
