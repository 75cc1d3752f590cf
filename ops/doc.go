// Package ops holds no code: its directory holds the Grafana dashboard
// (grafana/pgdcb.json) and the Prometheus alerting rules
// (prometheus/pgdcb-rules.yml) of docs/OPERATIONS.md, and its tests check
// them against the metrics the code defines.
package ops
