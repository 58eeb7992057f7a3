module github.com/seqkeeper/seqkeeper/internal/tools/dashboard

go 1.26.8

require github.com/grafana/grafana-foundation-sdk/go v0.0.22
