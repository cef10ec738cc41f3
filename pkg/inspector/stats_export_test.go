package inspector

// MaxStatsEndpoints is maxStatsEndpoints, for the tests of package
// inspector_test.
const MaxStatsEndpoints = maxStatsEndpoints
