/*
 * An intrusive AVL tree keyed by uint64_t: the offset index of an object.
 *
 * SPDX-License-Identifier: MIT
 *
 * Each node carries the height of its subtree; after every insertion or
 * removal the path back to the root is rebalanced so that the heights of the
 * two children of any node differ by at most one. The depth is therefore at
 * most 1.44 log2(n), which keeps the recursion below shallow (under 90 levels
 * for any n that fits in memory). Keys are unique: the caller checks.
 *
 * Each node also counts the marked nodes of its subtree (marks), kept by
 * update() through every rotation, so that the next marked node after a key
 * (the next DIRTY buffer of an object) is found in O(log n) without walking
 * the clean ones.
 */
#include "internal.h"

static int32_t height(const struct us_tnode *n)
{
	return n ? n->height : 0;
}

static uint64_t marks(const struct us_tnode *n)
{
	return n ? n->marks : 0;
}

static void update(struct us_tnode *n)
{
	int32_t l = height(n->left), r = height(n->right);

	n->height = 1 + (l > r ? l : r);
	n->marks = n->mark + marks(n->left) + marks(n->right);
}

static struct us_tnode *rotate_right(struct us_tnode *n)
{
	struct us_tnode *l = n->left;

	n->left = l->right;
	l->right = n;
	update(n);
	update(l);
	return l;
}

static struct us_tnode *rotate_left(struct us_tnode *n)
{
	struct us_tnode *r = n->right;

	n->right = r->left;
	r->left = n;
	update(n);
	update(r);
	return r;
}

/* Restores the AVL property at n, whose children are balanced. */
static struct us_tnode *balance(struct us_tnode *n)
{
	int32_t bf;

	update(n);
	bf = height(n->left) - height(n->right);
	if (bf > 1) {
		if (height(n->left->left) < height(n->left->right))
			n->left = rotate_left(n->left);
		return rotate_right(n);
	}
	if (bf < -1) {
		if (height(n->right->right) < height(n->right->left))
			n->right = rotate_right(n->right);
		return rotate_left(n);
	}
	return n;
}

struct us_tnode *us__tree_insert(struct us_tnode *root, struct us_tnode *n)
{
	if (!root) {
		n->left = n->right = NULL;
		n->height = 1;
		n->marks = n->mark;
		return n;
	}
	if (n->key < root->key)
		root->left = us__tree_insert(root->left, n);
	else
		root->right = us__tree_insert(root->right, n);
	return balance(root);
}

static struct us_tnode *remove_min(struct us_tnode *n, struct us_tnode **min)
{
	if (!n->left) {
		*min = n;
		return n->right;
	}
	n->left = remove_min(n->left, min);
	return balance(n);
}

/* The subtree of n without n itself. */
static struct us_tnode *unlink_top(struct us_tnode *n)
{
	struct us_tnode *m;

	if (!n->left)
		return n->right;
	if (!n->right)
		return n->left;
	/* Replace the node by its successor, relinked in its place. */
	n->right = remove_min(n->right, &m);
	m->left = n->left;
	m->right = n->right;
	return balance(m);
}

struct us_tnode *us__tree_remove(struct us_tnode *root, uint64_t key)
{
	if (!root)
		return NULL;
	if (key == root->key)
		return unlink_top(root);
	if (key < root->key)
		root->left = us__tree_remove(root->left, key);
	else
		root->right = us__tree_remove(root->right, key);
	return balance(root);
}

struct us_tnode *us__tree_insert_by(struct us_tnode *root, struct us_tnode *n,
				    us_tree_before before)
{
	if (!root) {
		n->left = n->right = NULL;
		n->height = 1;
		n->marks = n->mark;
		return n;
	}
	if (before(n, root))
		root->left = us__tree_insert_by(root->left, n, before);
	else
		root->right = us__tree_insert_by(root->right, n, before);
	return balance(root);
}

struct us_tnode *us__tree_remove_by(struct us_tnode *root, struct us_tnode *n,
				    us_tree_before before)
{
	if (!root)
		return NULL;
	if (root == n)
		return unlink_top(root);
	if (before(n, root))
		root->left = us__tree_remove_by(root->left, n, before);
	else
		root->right = us__tree_remove_by(root->right, n, before);
	return balance(root);
}

struct us_tnode *us__tree_first(struct us_tnode *n)
{
	while (n && n->left)
		n = n->left;
	return n;
}

struct us_tnode *us__tree_find_le(struct us_tnode *n, uint64_t key)
{
	struct us_tnode *best = NULL;

	while (n) {
		if (n->key == key)
			return n;
		if (n->key < key) {
			best = n;
			n = n->right;
		} else {
			n = n->left;
		}
	}
	return best;
}

struct us_tnode *us__tree_find_ge(struct us_tnode *n, uint64_t key)
{
	struct us_tnode *best = NULL;

	while (n) {
		if (n->key == key)
			return n;
		if (n->key > key) {
			best = n;
			n = n->left;
		} else {
			n = n->right;
		}
	}
	return best;
}

void us__tree_set_mark(struct us_tnode *root, uint64_t key, bool mark)
{
	struct us_tnode *n = us__tree_find_le(root, key);
	uint64_t delta;

	assert(n && n->key == key);
	if (!n || n->key != key || n->mark == (uint32_t)mark)
		return;
	/* Heights do not change: one pass down adds the change to each count
	 * on the path (unsigned wrap-around makes -1 an addition too). */
	delta = mark ? 1 : (uint64_t)-1;
	n->mark = mark;
	for (n = root; n->key != key; n = key < n->key ? n->left : n->right)
		n->marks += delta;
	n->marks += delta;
}

static struct us_tnode *first_marked(struct us_tnode *n)
{
	while (n && n->marks) {
		if (marks(n->left))
			n = n->left;
		else if (n->mark)
			return n;
		else
			n = n->right;
	}
	return NULL;
}

struct us_tnode *us__tree_find_ge_marked(struct us_tnode *n, uint64_t key)
{
	struct us_tnode *r;

	while (n && n->marks && n->key < key)
		n = n->right;
	if (!n || !n->marks)
		return NULL;
	/* n->key >= key: its left subtree may hold keys >= key too. */
	r = us__tree_find_ge_marked(n->left, key);
	if (r)
		return r;
	if (n->mark)
		return n;
	return first_marked(n->right);
}

/* n's height, balance and mark count, from its children's. */
static bool shape_ok(const struct us_tnode *n)
{
	int32_t l = height(n->left), r = height(n->right);

	return n->height == 1 + (l > r ? l : r) && l - r <= 1 && r - l <= 1 &&
	       n->marks == n->mark + marks(n->left) + marks(n->right);
}

static int64_t check(const struct us_tnode *n, uint64_t lo, uint64_t hi, bool has_lo, bool has_hi)
{
	int64_t l, r;

	if (!n)
		return 0;
	if ((has_lo && n->key <= lo) || (has_hi && n->key >= hi))
		return -1;
	l = check(n->left, lo, n->key, has_lo, true);
	r = check(n->right, n->key, hi, true, has_hi);
	if (l < 0 || r < 0)
		return -1;
	if (!shape_ok(n))
		return -1;
	return 1 + l + r;
}

int64_t us__tree_check(const struct us_tnode *root)
{
	return check(root, 0, 0, false, false);
}

/* The shape of n (heights, balance, mark counts) and the order of its nodes
 * by before(), *prev being the node before n's subtree in that order. */
static int64_t check_by(const struct us_tnode *n, us_tree_before before,
			const struct us_tnode **prev)
{
	int64_t l, r;

	if (!n)
		return 0;
	l = check_by(n->left, before, prev);
	if (l < 0 || (*prev && !before(*prev, n)))
		return -1;
	*prev = n;
	r = check_by(n->right, before, prev);
	if (r < 0)
		return -1;
	if (!shape_ok(n))
		return -1;
	return 1 + l + r;
}

int64_t us__tree_check_by(const struct us_tnode *root, us_tree_before before)
{
	const struct us_tnode *prev = NULL;

	return check_by(root, before, &prev);
}
