"""The CDK app: one stack composed of one construct per concern, built from the runtime's own definitions."""
