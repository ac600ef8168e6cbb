package emulator

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
)

// The account: what a read of the endpoint's root answers.

func (e *Emulator) getAccount(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	scheme := "http"
	if requestIsTLS(r) {
		scheme = "https"
		// Over TLS the account advertises 127.0.0.1 for localhost, as the official emulator
		// does (SDK tests compare the regions' endpoints).
		if h, port, err := net.SplitHostPort(host); err == nil && strings.EqualFold(h, "localhost") {
			host = net.JoinHostPort("127.0.0.1", port)
		}
	}
	loc := []map[string]string{{"name": "South Central US", "databaseAccountEndpoint": scheme + "://" + host + "/"}}
	body := map[string]any{
		"id":                           "cfp-emulator",
		"_rid":                         "cfp-emulator.documents.azure.com",
		"_self":                        "",
		"_dbs":                         "//dbs/",
		"media":                        "//media/",
		"addresses":                    "//addresses/",
		"writableLocations":            loc,
		"readableLocations":            loc,
		"enableMultipleWriteLocations": false,
		"userConsistencyPolicy":        map[string]string{"defaultConsistencyLevel": e.opts.DefaultConsistency},
		"userReplicationPolicy":        map[string]any{"asyncReplication": false, "minReplicaSetSize": 1, "maxReplicasetSize": 4},
		"systemReplicationPolicy":      map[string]any{"minReplicaSetSize": 1, "maxReplicasetSize": 4},
		"readPolicy":                   map[string]any{"primaryReadCoefficient": 1, "secondaryReadCoefficient": 1},
		"queryEngineConfiguration":     `{"maxSqlQueryInputLength":262144,"maxJoinsPerSqlQuery":5,"sqlAllowTop":true,"sqlAllowAggregateFunctions":true}`,
	}
	b, _ := json.Marshal(body)
	writeJSON(w, http.StatusOK, chargeMeta, b)
}
