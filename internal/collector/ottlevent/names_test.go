package ottlevent

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRewriteNames(t *testing.T) {
	for in, want := range map[string]string{
		`severity_number >= 17`:                    `severity_number >= 17`,
		`traceId`:                                  `event["traceId"]`,
		`severityNumber >= 17 and body == "x"`:     `event["severityNumber"] >= 17 and body == "x"`,
		`resourceAttributes["k8s.pod.name"]`:       `event["resourceAttributes"]["k8s.pod.name"]`,
		`event.traceId == event._source`:           `event["traceId"] == event["_source"]`,
		`status.errorCode`:                         `status.errorCode`, // only event. is absorbed
		`myevent.traceId`:                          `myevent.traceId`,
		`"traceId" == traceId`:                     `"traceId" == event["traceId"]`,
		`"a \"quoted\" fooBar" == fooBar`:          `"a \"quoted\" fooBar" == event["fooBar"]`,
		`IsMatch(body, "x") and IsString(spanId)`:  `IsMatch(body, "x") and IsString(event["spanId"])`,
		`myFunc(body)`:                             `myFunc(body)`, // a function: left for OTTL to refuse
		`Foo(keyName = 1)`:                         `Foo(keyName = 1)`,
		`severity_number >= SEVERITY_NUMBER_ERROR`: `severity_number >= SEVERITY_NUMBER_ERROR`,
		`Filter(items, (myItem) => myItem > 1)`:    `Filter(items, (myItem) => myItem > 1)`,
		`_ == 1`:                                   `_ == 1`,
		`x == 0x1F and y == 1.5e3`:                 `x == 0x1F and y == 1.5e3`,
	} {
		assert.Equal(t, want, rewriteNames(in).text, in)
	}
}

func TestRewriteNamesOffsets(t *testing.T) {
	in := `traceId == "a" and spanId == "b" and x`
	rw := rewriteNames(in)
	assert.Equal(t, `event["traceId"] == "a" and event["spanId"] == "b" and x`, rw.text)
	for rewritten, orig := range map[int]int{0: 0, 3: 0, 16: 7, 28: 19, 30: 19, 43: 25, 45: 27, len(rw.text) - 1: len(in) - 1} {
		assert.Equal(t, orig, rw.origOffset(rewritten), "offset %d", rewritten)
	}
}
