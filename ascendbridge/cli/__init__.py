"""Command-line front ends: argument parsing, one-line errors, tables for people, JSON for tools."""
