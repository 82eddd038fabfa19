// Package export turns stored runs into other tools' formats and brings
// other tools' results in: Service Mesh Performance (SMP) documents, the
// runs' Fortio JSON and Istio's benchmark CSV out; Fortio JSON results
// (from Fortio itself or Nighthawk's fortio output) into the store, as runs
// that `meshperf compare` can set against meshperf's own.
package export

// Formats are what `meshperf export --format` writes.
var Formats = []string{FormatSMP, FormatFortio, FormatIstioCSV}

// Export formats.
const (
	FormatSMP      = "smp"       // one SMPDocument
	FormatFortio   = "fortio"    // each run's Fortio JSON, one file per run
	FormatIstioCSV = "istio-csv" // results.WriteCSV: Istio's columns, then meshperf's
)
