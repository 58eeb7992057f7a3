// Package chartcheck holds the tests that render the Helm chart
// charts/seqkeeper with Helm's own Go packages (the engine `helm template`
// uses, with the chart's values.schema.json) and check what seqkeeper makes
// of the result: that the config file the chart writes for several roots,
// with the environment its Deployment sets, is one seqkeeper's config
// package loads, with the roots as given. It is a module of its own so
// that Helm and the Kubernetes API types stay out of seqkeeper's module
// graph; scripts/validate-manifests.sh runs its tests:
//
//	cd internal/tools/chartcheck && go test ./...
package chartcheck
