package compare

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// Number is a figure that may be unknown (NaN). JSON has no NaN, so an
// unknown figure is written as null and read back as NaN; -json's output
// then decodes into the same Report.
type Number float64

func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

func (n *Number) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*n = Number(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Number(f)
	return nil
}

// IsNaN says the figure is unknown.
func (n Number) IsNaN() bool { return math.IsNaN(float64(n)) }
