package validation

// HeaderProjectID names the project whose pipeline a check request carries. A header,
// not a body field, so the body stays the mirror.Pipeline older responders read, and a
// request without it (an older control plane) is checked as before, without warnings.
const HeaderProjectID = "Svc-Project-Id"

// Warning is something in a valid pipeline that will likely not do what its author
// means, such as a field the project's records never had: shown beside the
// field, never a reason to refuse the pipeline.
type Warning struct {
	Field string `json:"field"`
	// Index is the statement's place in transforms (0-based); nil for other fields.
	Index    *int      `json:"index,omitempty"`
	Position *Position `json:"position,omitempty"`
	Message  string    `json:"message"`
}

// Position is 1-based, as OTTL's parser counts (columns in characters).
type Position struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}
