// Package deploycheck validates cfp's Kubernetes manifests (deploy/kubernetes) without a
// cluster or network: its test builds every kustomization with the kustomize API, decodes
// each resource strictly into its Kubernetes API type (KEDA's into the types in keda.go,
// which mirror KEDA's v1alpha1 API), and checks what cfp needs of them. It also writes the
// manifests a release publishes, pinned to the release's images (WriteReleaseManifests, run by
// tools/releasemanifests from .goreleaser.yaml), and checks them. It lives in the
// tools module so that cfp itself does not depend on the Kubernetes libraries.
package deploycheck
