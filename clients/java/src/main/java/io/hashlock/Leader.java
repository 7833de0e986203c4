package io.hashlock;

/**
 * Who leads an election, and the number of the term: greater than every
 * earlier term's (the term is the fencing token of the leader's grant), so a
 * resource written by leaders can refuse a write of an older term.
 */
public record Leader(String id, long term) {}
