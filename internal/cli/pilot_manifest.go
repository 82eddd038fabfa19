package cli

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshperf/meshperf/internal/pilot/inject"
	"github.com/meshperf/meshperf/internal/version"
)

// imageFlags name the images the pilot runs from and injects: the
// contract REPO/meshperf:TAG and REPO/meshperf-proxy:TAG.
type imageFlags struct {
	repo, tag, pullPolicy string
}

func (f *imageFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.repo, "image-repo", inject.DefaultImageRepo, "image `repository`: REPO/meshperf:TAG and REPO/meshperf-proxy:TAG")
	fs.StringVar(&f.tag, "tag", "", "image `tag` (default: this meshperf's version)")
	fs.StringVar(&f.pullPolicy, "pull-policy", string(corev1.PullIfNotPresent), "the images' `policy`: Always, IfNotPresent, or Never for images imported into the node")
}

// Repository names and tags as the OCI distribution spec allows them.
var (
	imageRepoRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$`)
	imageTagRE  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
)

// options checks the flags and returns the injection's options.
func (f *imageFlags) options() (inject.Options, error) {
	if f.tag == "" {
		f.tag = defaultImageTag()
	}
	switch {
	case !imageRepoRE.MatchString(f.repo):
		return inject.Options{}, usagef("--image-repo %q is not an image repository (lowercase host[:port]/path, e.g. %s)", f.repo, inject.DefaultImageRepo)
	case !imageTagRE.MatchString(f.tag):
		return inject.Options{}, usagef("--tag %q is not an image tag (letters, digits, '_', '.', '-'; at most 128)", f.tag)
	}
	policy := corev1.PullPolicy(f.pullPolicy)
	switch policy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return inject.Options{}, usagef("--pull-policy %q: want Always, IfNotPresent or Never", f.pullPolicy)
	}
	return inject.Options{ImageRepo: f.repo, Tag: f.tag, PullPolicy: policy}, nil
}

// defaultImageTag is this meshperf's version as an image tag: characters a
// tag may not hold (the '+' of a build suffix) become '-'.
func defaultImageTag() string {
	tag := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '-'
	}, version.String())
	tag = strings.TrimLeft(tag, ".-")
	if len(tag) > 128 {
		tag = tag[:128]
	}
	if tag == "" {
		return "dev"
	}
	return tag
}

// PilotManifest is `meshperf pilot manifest`: the YAML that deploys the
// pilot on Kubernetes, on stdout.
func PilotManifest(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf pilot manifest", "[flags]",
		"Prints the YAML that deploys meshperf pilot on Kubernetes: its namespace, service account and RBAC (what it reads and writes, no more), "+
			"the Deployment, the Service (15010, 15012, 15014, 443 -> 15017) and the sidecar injector's MutatingWebhookConfiguration "+
			"(namespaces labelled istio-injection=enabled). Apply it with kubectl apply -f -.")
	var images imageFlags
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
