//! Hand-built schedules reproducing known findings.
