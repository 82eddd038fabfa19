package cli

import (
	"flag"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/pilot/inject"
)

// injectImageFlags name the images the pilot runs from and injects
// (REPO/meshperf:TAG and REPO/meshperf-proxy:TAG) and how nodes pull them.
type injectImageFlags struct {
	repo, tag, pullPolicy string
}

func (f *injectImageFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.repo, "image-repo", image.DefaultRepo, "image `repository`: REPO/meshperf:TAG and REPO/meshperf-proxy:TAG")
	fs.StringVar(&f.tag, "tag", "", "image `tag` (default: this meshperf's version)")
	fs.StringVar(&f.pullPolicy, "pull-policy", string(corev1.PullIfNotPresent), "the images' `policy`: Always, IfNotPresent, or Never for images imported into the node")
}

// options checks the flags and returns the injection's options.
func (f *injectImageFlags) options() (inject.Options, error) {
	if f.tag == "" {
		f.tag = image.Tag()
	}
	if err := image.CheckRepo(f.repo); err != nil {
		return inject.Options{}, usageError{err.Error()}
	}
	if err := image.CheckTag(f.tag); err != nil {
		return inject.Options{}, usageError{err.Error()}
	}
	policy := corev1.PullPolicy(f.pullPolicy)
	switch policy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return inject.Options{}, usagef("--pull-policy %q: want Always, IfNotPresent or Never", f.pullPolicy)
	}
	return inject.Options{ImageRepo: f.repo, Tag: f.tag, PullPolicy: policy}, nil
}

// PilotManifest is `meshperf pilot manifest`: the YAML that deploys the
// pilot on Kubernetes, on stdout.
func PilotManifest(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf pilot manifest", "[flags]",
		"Prints the YAML that deploys meshperf pilot on Kubernetes: its namespace, service account and RBAC (what it reads and writes, no more), "+
			"the Deployment, the Service (15010, 15012, 15014, 443 -> 15017) and the sidecar injector's MutatingWebhookConfiguration "+
			"(namespaces labelled istio-injection=enabled). Apply it with kubectl apply -f -.")
	var images injectImageFlags
	images.define(cmd.flags)
	var namespace string
	cmd.flags.StringVar(&namespace, "namespace", inject.PilotNamespace, "the pilot's `namespace`")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	opts, err := images.options()
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if len(validation.IsDNS1123Label(namespace)) > 0 {
		return cmd.exit(stderr, usagef("--namespace %q is not a namespace name (lowercase letters, digits and '-', at most 63)", namespace))
	}
	doc, err := inject.ManifestYAML(inject.ManifestOptions{Namespace: namespace, Injection: opts})
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if _, err := stdout.Write(doc); err != nil {
		return cmd.exit(stderr, fmt.Errorf("write the manifest: %w", err))
	}
	return exitOK
}
