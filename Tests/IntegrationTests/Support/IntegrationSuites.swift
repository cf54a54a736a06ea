import Testing

/// Every integration suite nests here so that they run one at a time: they spawn processes and
/// block on their output, and the machine has two cores.
@Suite(.serialized) enum IntegrationSuites {}

/// The suites that build this package as its users do (make, make install, make deb with
/// lintian, the Examples package) nest here: one at a time, and beside IntegrationSuites rather
/// than inside it. They wait on compilers and dpkg, not on a bus or a clock, and the integration
/// suites, one at a time, kept less than one of the two cores busy (/usr/bin/time of a whole
/// `swift test`: 89-91% of one CPU over 469-517 s). Nothing here changes what an integration
/// test runs: the packages installed for a moment go to /usr, /usr/local and a staging root, and
/// every integration test runs the binaries built beside it (ChildProcess.productsDirectory).
@Suite(.serialized) enum BuildSuites {}
