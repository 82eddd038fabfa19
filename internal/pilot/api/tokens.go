package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// TokenRequest asks the control plane for a pod's token, as Kubernetes'
// TokenRequest asks the API server: the service account it names, the
// pod it is bound to and that pod's node (both optional), and its lifetime
// in seconds (0: an hour).
type TokenRequest struct {
	Namespace         string `json:"namespace"`
	ServiceAccount    string `json:"serviceAccount"`
	Pod               string `json:"pod,omitempty"`
	Node              string `json:"node,omitempty"`
	ExpirationSeconds int64  `json:"expirationSeconds,omitempty"`
}

// TokenResponse is an issued token and when it expires.
type TokenResponse struct {
	Token               string    `json:"token"`
	ExpirationTimestamp time.Time `json:"expirationTimestamp"`
}

// TokenIssuer issues pods' tokens: the pilot's ca.TokenIssuer. An error
// with a BadRequest method is the request's fault (answered 400).
type TokenIssuer interface {
	IssuePodToken(namespace, serviceAccount, pod, node string, lifetime time.Duration) (token string, expires time.Time, err error)
}

// maxTokenRequestBytes bounds a token request's body: its five fields are
// names of at most 253 characters.
const maxTokenRequestBytes = 4 << 10

// maxExpirationSeconds is a year: more than any issuer grants, far from
// overflowing a Duration.
const maxExpirationSeconds = 365 * 24 * 60 * 60

// issueToken answers POST /api/v1/tokens.
func (h *handler) issueToken(w http.ResponseWriter, r *http.Request) {
	if h.d.Tokens == nil {
		writeError(w, http.StatusConflict, "this control plane issues no tokens: on Kubernetes the kubelet projects each pod's "+
			"service-account token (audience istio-ca), which the CA and xDS accept")
		return
	}
	var req TokenRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxTokenRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "token request: want one JSON object with namespace, serviceAccount, pod, node and expirationSeconds: "+err.Error())
		return
	}
	// The issuer bounds the lifetime; this only keeps the seconds from
	// overflowing a Duration on the way.
	if req.ExpirationSeconds < 0 || req.ExpirationSeconds > maxExpirationSeconds {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("token request: expirationSeconds %d is not a lifetime in seconds (at most %d)",
			req.ExpirationSeconds, maxExpirationSeconds))
		return
	}
	token, exp, err := h.d.Tokens.IssuePodToken(req.Namespace, req.ServiceAccount, req.Pod, req.Node,
		time.Duration(req.ExpirationSeconds)*time.Second)
	var bad interface{ BadRequest() }
	switch {
	case errors.As(err, &bad):
		writeError(w, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		h.log.Error("token not issued", "error", err)
		writeError(w, http.StatusInternalServerError, "token not issued: "+err.Error())
		return
	}
	// Who got which identity, for an operator tracing a proxy's identity
	// back; never the token itself.
	h.log.Info("token issued", "namespace", req.Namespace, "serviceAccount", req.ServiceAccount, "pod", req.Pod,
		"node", req.Node, "expires", exp)
	writeJSON(w, http.StatusCreated, TokenResponse{Token: token, ExpirationTimestamp: exp.UTC()})
}

// IssueToken asks the control plane for a pod's token (POST
// /api/v1/tokens), which the proxy then sends to the CA and on xDS to
// prove who it is.
func (c *Client) IssueToken(ctx context.Context, req TokenRequest) (*TokenResponse, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var resp TokenResponse
	if err := c.call(ctx, http.MethodPost, "/api/v1/tokens", nil, &requestBody{contentType: "application/json", data: body}, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}
