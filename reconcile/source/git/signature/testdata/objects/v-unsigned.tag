object f94d125566e4efa8f32f0d36b1728fb0b029a214
type commit
tag v-unsigned
tagger Test <test@example.com> 1700000000 +0000

release v-unsigned
