//go:build !race

package ottlevent

const raceDetector = false
