package inject

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWorkloadName(t *testing.T) {
	yes := true
	owned := func(kind, name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}}}
	}
	for _, c := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{owned("ReplicaSet", "server-5d9f8c7b6", map[string]string{"pod-template-hash": "5d9f8c7b6"}), "server"},
		{owned("ReplicaSet", "server-5d9f8c7b6", nil), "server-5d9f8c7b6"}, // a ReplicaSet of its own
		{owned("ReplicaSet", "server-5d9f8c7b6", map[string]string{"pod-template-hash": "x"}), "server-5d9f8c7b6"},
		{owned("StatefulSet", "db", nil), "db"},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "echo"}}, "echo"},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "job-"}}, "job"},
	} {
		if got := WorkloadName(c.pod); got != c.want {
			t.Errorf("WorkloadName(%s owned by %v, labels %v) = %q, want %q", c.pod.GenerateName+c.pod.Name, c.pod.OwnerReferences, c.pod.Labels, got, c.want)
		}
	}
}
