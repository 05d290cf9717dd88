//go:build race

package ottlevent

// The race detector's instrumentation makes the runtime allocate several times what
// the code does (shadow memory, the detector's own bookkeeping show in MemStats), so
// tests that bound the bytes allocated measure the detector, not the code, under it.
const raceDetector = true
