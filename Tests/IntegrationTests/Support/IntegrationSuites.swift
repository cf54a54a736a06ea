import Testing

/// Every integration suite nests here so that they run one at a time: they spawn processes and
/// block on their output, and the machine has two cores.
@Suite(.serialized) enum IntegrationSuites {}
