package compare

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes the report as indented JSON (docs/tracking.md gives the
// schema). Unknown figures are null.
func WriteJSON(w io.Writer, rep Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		return fmt.Errorf("write comparison JSON: %w", err)
	}
	return nil
}

// ReadJSON reads a report WriteJSON wrote.
func ReadJSON(r io.Reader) (Report, error) {
	var rep Report
	if err := json.NewDecoder(r).Decode(&rep); err != nil {
		return Report{}, fmt.Errorf("read comparison JSON: %w", err)
	}
	return rep, nil
}
