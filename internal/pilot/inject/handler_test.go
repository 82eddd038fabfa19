package inject

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
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
