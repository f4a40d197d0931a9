package client

// ItemCheckInterval is itemCheckInterval for the external tests: how many
// items a batch's loops may prepare between two looks at the context.
const ItemCheckInterval = itemCheckInterval
