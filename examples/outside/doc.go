// Package outside is a Go program's view of cfp, as a module of its own that requires
// github.com/cfp-dev/cfp (replaced by this checkout): its test runs a change feed processor
// with the Prometheus hook (changefeed/prom) against cfp's emulator through the test kit
// (changefeed/changefeedtest), splits a partition mid-test, and reads the metrics and probes
// a scraper would. cfp's own test TestOutsideModule builds and tests it with CGO_ENABLED=0.
package outside
