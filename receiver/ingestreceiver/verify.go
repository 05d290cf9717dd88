package ingestreceiver

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
)

// msgNoTokenURL answers a URL below an ingest URL when the source takes no URL token.
const msgNoTokenURL = "no push source has this ingest URL: only a source verified by a URL token has a token after its ingest key; POST to /ingest/<ingest_key>"

// verificationCounter is the projectauth extension's count of push requests it let through
// for their source's verification; another authenticator may not have it.
type verificationCounter interface {
	CountIngestVerification(ctx context.Context, err error)
}

// takesURLToken reports whether src's requests carry a token in their URL.
func takesURLToken(src mirror.Source) bool {
	return src.Verification != nil && src.Verification.Scheme == sourceverify.SchemeURLToken
}

// verify checks a push request against its source's verification, when the authenticator
// left one to check (a request authenticated by a header credential has none): nil when it
// passes, else 401 signature_invalid with what the sender's owner should fix.
func (r *ingestReceiver) verify(ctx context.Context, src mirror.Source, h http.Header, urlToken string, body []byte) *apierror.Error {
	if src.Verification == nil {
		return nil
	}
	err := sourceverify.Verify(*src.Verification, h, urlToken, body, time.Now())
	if c, ok := r.dp.(verificationCounter); ok {
		c.CountIngestVerification(ctx, err)
	}
	if err == nil {
		return nil
	}
	msg := err.Error()
	var ve *sourceverify.Error
	if errors.As(err, &ve) && ve.Reason == sourceverify.ReasonConfig {
		// The sender can do nothing about it; the cause is for the operator only.
		r.settings.Logger.Warn("a push source's verification settings are not valid; its requests are refused",
			zap.String("source_id", src.ID), zap.String("project_id", src.ProjectID), zap.Error(errors.Unwrap(err)))
	}
	return apierror.New(http.StatusUnauthorized, apierror.SignatureInvalid, msg+"; nothing was stored")
}
