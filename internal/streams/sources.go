package streams

// HeaderSourceID names the push source a "source" record came from (its source id), so
// readers can filter a project's raw stream by source without opening records.
const HeaderSourceID = "Svc-Source-Id"
