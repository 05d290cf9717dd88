package principal

import "errors"

// Outcomes of push-ingest and console authentication, beside ErrMissingKey, ErrInvalidKey
// and ErrNotReady. Callers map them to answers: 404 not_found, 401 invalid_token.
var (
	// ErrNotFound: the ingest URL names no source, or the credential does not open the
	// project asked for (answered like an unknown project, so it reveals nothing).
	ErrNotFound = errors.New("not found")
	// ErrInvalidToken: a service ingest token or console token that is not valid.
	ErrInvalidToken = errors.New("the token is not valid")
	// ErrInsufficientScope: a valid API key without the scope the request needs; callers
	// answer 403 insufficient_scope with the refusal's message, which names the scope.
	ErrInsufficientScope = errors.New("the API key lacks the scope this needs")
)

// Scopes of principals beside the key scopes of internal/mirror.
const (
	// ScopeConsole is a console token's principal: it only reads its project's records.
	ScopeConsole = "console"
)

// AuthError is an authentication refusal with a message for the person sending the
// request; Err is one of the Err* values above, which decides the status.
type AuthError struct {
	Err error
	Msg string
}

func (e *AuthError) Error() string { return e.Msg }

// Unwrap lets errors.Is match Err.
func (e *AuthError) Unwrap() error { return e.Err }

// Refuse returns an AuthError.
func Refuse(err error, msg string) error { return &AuthError{Err: err, Msg: msg} }

// Message returns the message of an AuthError in err's chain, or fallback.
func Message(err error, fallback string) string {
	var ae *AuthError
	if errors.As(err, &ae) && ae.Msg != "" {
		return ae.Msg
	}
	return fallback
}
