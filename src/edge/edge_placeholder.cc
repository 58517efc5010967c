// Keeps the edge library non-empty until its engines land.
namespace hengshi::edge {
int edge_placeholder() { return 0; }
}  // namespace hengshi::edge
