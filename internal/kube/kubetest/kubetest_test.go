package kubetest

import (
	"context"
	"os"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// The server answers as a cluster's would: objects are stored, and a token
// issued for a service account with Istio's CA audience passes a TokenReview
// naming that audience, which is what the control plane's CA relies on.
func TestServerIssuesAndReviewsServiceAccountTokens(t *testing.T) {
	s := Start(t)
	c := s.Client(t)
	ns := s.NewNamespace(t, map[string]string{"istio-injection": "enabled"})
	ctx := context.Background()
	got, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["istio-injection"] != "enabled" {
		t.Fatalf("namespace labels = %v, want istio-injection=enabled", got.Labels)
	}
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "client"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "client", &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{Audiences: []string{"istio-ca"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	review, err := c.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{
		Spec: authv1.TokenReviewSpec{Token: tr.Status.Token, Audiences: []string{"istio-ca"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "system:serviceaccount:" + ns + ":client"; !review.Status.Authenticated || review.Status.User.Username != want {
		t.Fatalf("review = %+v, want authenticated as %s", review.Status, want)
	}
}
