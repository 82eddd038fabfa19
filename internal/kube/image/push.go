package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Push uploads img to its registry as ref, with the credentials of the
// default keychain (docker's config.json and its credential helpers, as
// `docker login` leaves them). A registry on a loopback or private address
// is spoken to over plain HTTP, as go-containerregistry does.
func Push(ctx context.Context, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	err = remote.Write(tag, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return fmt.Errorf("pushing %s: %s", ref, pushErrorLine(tag.RegistryStr(), err))
	}
	return nil
}

// pushErrorLine says in one line why a push failed: an unreachable
// registry and a refusal read differently from the transport's own text.
func pushErrorLine(registry string, err error) string {
	var terr *transport.Error
	var uerr *url.Error
	var nerr *net.OpError
	switch {
	case errors.As(err, &terr) && (terr.StatusCode == 401 || terr.StatusCode == 403):
		return fmt.Sprintf("registry %s refused the credentials (status %d): log in with `docker login %s` or set DOCKER_CONFIG", registry, terr.StatusCode, registry)
	case errors.As(err, &nerr), errors.As(err, &uerr):
		return fmt.Sprintf("registry %s unreachable: %v", registry, err)
	}
	return err.Error()
}
