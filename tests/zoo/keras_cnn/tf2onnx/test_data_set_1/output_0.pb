
B
Identity:0J(Äª¾-W¿À²O¿ÑÉk>!L¿ã[K;´‡A½™,o?xy?£´Q¾