// Package ops holds no code: its directory holds the Grafana dashboard
// (grafana/pgdcb.json) and the Prometheus alerting rules
// (prometheus/pgdcb-rules.yml) of docs/OPERATIONS.md. The tests of package
// pgdcbprom (ops_test.go) check them against the metrics the code defines.
package ops
