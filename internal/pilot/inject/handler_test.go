package inject

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"istio.io/api/annotation"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestWebhookRefusesWhatIsNotAnAdmissionReview(t *testing.T) {
	wh, err := NewWebhook(testOptions, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, method, contentType, body string
		want                            int
	}{
		{"GET", http.MethodGet, "application/json", "", http.StatusMethodNotAllowed},
		{"not JSON content", http.MethodPost, "text/plain", "{}", http.StatusUnsupportedMediaType},
		{"bad JSON", http.MethodPost, "application/json", "{", http.StatusBadRequest},
		{"no request", http.MethodPost, "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(c.method, WebhookPath, strings.NewReader(c.body))
		req.Header.Set("Content-Type", c.contentType)
		wh.ServeHTTP(rec, req)
		if rec.Code != c.want {
			t.Errorf("%s: status %d, want %d", c.name, rec.Code, c.want)
		}
	}
}

// A pod whose JSON does not decode is admitted, with the reason, and
// the response still names the request.
func TestWebhookAdmitsUndecodablePod(t *testing.T) {
	wh, err := NewWebhook(testOptions, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	review := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{
		UID: "42", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: []byte(`{"spec":{"containers":"not a list"}}`)},
	}}
	body, _ := json.Marshal(review)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, WebhookPath, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	wh.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if out.Response == nil || !out.Response.Allowed || out.Response.UID != "42" || out.Response.Patch != nil || len(out.Response.Warnings) != 1 {
		t.Errorf("response %+v, want allowed, uid 42, no patch, one warning", out.Response)
	}
}

// FuzzWebhookReview: whatever the pod, the webhook admits it, and a patch
// it returns applies to the pod (as the API server applies it) and gives
// it the sidecar.
func FuzzWebhookReview(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"a","annotations":{"traffic.sidecar.istio.io/excludeOutboundPorts":"5432"}},"spec":{"containers":[{"name":"app"}]}}`))
	f.Add([]byte(`{"metadata":{"labels":{"sidecar.istio.io/inject":"false"}},"spec":{}}`))
	f.Add([]byte(`{"spec":{"initContainers":[{"name":"x"}],"volumes":[{"name":"v"}],"containers":null}}`))
	f.Add([]byte(`null`))
	// Keys a JSON Pointer must escape, null and existing members.
	f.Add([]byte(`{"metadata":{"name":"a/b~c","labels":{"app":"x","a/b~c":"1"},"annotations":null},"spec":{"containers":[{"name":"app"}]}}`))
	f.Add([]byte(`{"metadata":{"labels":{"security.istio.io/tlsMode":"disabled"},"annotations":{"x~/y":"1"}},"spec":{"containers":[]}}`))
	f.Add([]byte(`{"metadata":{"labels":null,"annotations":{}},"spec":{"containers":[{"name":"app"}]}}`))
	wh, err := NewWebhook(testOptions, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pod []byte) {
		resp := wh.Review(&admissionv1.AdmissionRequest{
			UID: "1", Namespace: "ns", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: pod},
		})
		if !resp.Allowed {
			t.Fatalf("refused: %+v", resp)
		}
		if resp.Patch == nil {
			return
		}
		patch, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("patch %s: %v", resp.Patch, err)
		}
		patched, err := patch.Apply(pod)
		if err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", resp.Patch, pod, err)
		}
		var got corev1.Pod
		if err := json.Unmarshal(patched, &got); err != nil {
			t.Fatal(err)
		}
		if container(&got, ProxyContainerName, false) == nil || got.Spec.InitContainers[0].Name != InitContainerName {
			t.Fatalf("patched pod lacks the sidecar: %s", patched)
		}
		// What the patch claims: the pod's own labels and annotations
		// kept, the injection's labels added where the pod had none, the
		// status annotation set.
		var orig corev1.Pod
		if err := json.Unmarshal(pod, &orig); err != nil {
			t.Fatal(err)
		}
		inj, err := testOptions.Sidecar(&orig)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range orig.Labels {
			if got.Labels[k] != v {
				t.Errorf("label %q = %q after the patch, was %q; patch %s", k, got.Labels[k], v, resp.Patch)
			}
		}
		for k, v := range inj.Labels {
			if got.Labels[k] != v {
				t.Errorf("label %q = %q after the patch, want %q; patch %s", k, got.Labels[k], v, resp.Patch)
			}
		}
		for k, v := range orig.Annotations {
			if k != annotation.SidecarStatus.Name && got.Annotations[k] != v {
				t.Errorf("annotation %q = %q after the patch, was %q; patch %s", k, got.Annotations[k], v, resp.Patch)
			}
		}
		if got.Annotations[annotation.SidecarStatus.Name] != inj.Status {
			t.Errorf("status annotation = %q, want %q; patch %s", got.Annotations[annotation.SidecarStatus.Name], inj.Status, resp.Patch)
		}
	})
}
