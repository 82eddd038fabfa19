package kube

import (
	"context"
	"fmt"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Resource is one API resource the pilot reads, by group and plural name.
type Resource struct {
	Group, Resource string
}

func (r Resource) String() string {
	if r.Group == "" {
		return r.Resource
	}
	return r.Resource + "." + r.Group
}

// WatchedVerbs are what an informer does with each resource.
var WatchedVerbs = []string{"list", "watch"}

// CoreResources are the Kubernetes resources the pilot watches for its
// service registry, whatever CRDs the cluster has.
var CoreResources = []Resource{
	{"", "namespaces"}, {"", "services"}, {"", "pods"}, {"", "nodes"},
	{"discovery.k8s.io", "endpointslices"},
}

// checkAccess asks the API server, for each resource and verb, whether the
// pilot's credentials may (SelfSubjectAccessReview, which every
// authenticated user may create), and fails with one line naming the user
// and every verb and resource it lacks. Asking first turns what would be a
// stream of informer retries logging 403s into one error at start.
func checkAccess(ctx context.Context, cs kubernetes.Interface, resources []Resource) error {
	var missing []string
	for _, res := range resources {
		var denied []string
		for _, verb := range WatchedVerbs {
			review := &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Group: res.Group, Resource: res.Resource},
			}}
			got, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("ask the API server whether %s may %s %s: %w", whoAmI(ctx, cs), verb, res, err)
			}
			if !got.Status.Allowed {
				denied = append(denied, verb)
			}
		}
		if len(denied) > 0 {
			missing = append(missing, strings.Join(denied, ", ")+" "+res.String())
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%s may not %s (cluster-wide): grant them, as the ClusterRole meshperf-pilot of `meshperf pilot manifest` does",
		whoAmI(ctx, cs), strings.Join(missing, "; "))
}

// whoAmI names the credentials' user as RBAC sees it: a service account as
// "service account NS/NAME", others by user name.
func whoAmI(ctx context.Context, cs kubernetes.Interface) string {
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || review.Status.UserInfo.Username == "" {
		return "the pilot's credentials"
	}
	name := review.Status.UserInfo.Username
	if rest, ok := strings.CutPrefix(name, "system:serviceaccount:"); ok {
		if ns, sa, ok := strings.Cut(rest, ":"); ok {
			return "service account " + ns + "/" + sa
		}
	}
	return "user " + name
}
